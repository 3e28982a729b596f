"""Sphinx configuration of the kernelscale documentation.

Build: ``python -m sphinx -W -b html docs docs/_build/html`` (warnings are errors, no network).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# Gallery examples start Dask worker processes: they must import this checkout too.
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p
)
os.environ.setdefault("MPLBACKEND", "Agg")

import kernelscale  # noqa: E402

project = "kernelscale"
author = "the kernelscale developers"
copyright = "2026, the kernelscale developers"
version = release = kernelscale.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.intersphinx",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
    "sphinx_copybutton",
    "sphinx-mathjax-offline",  # MathJax served from the site itself: formulas render offline
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
templates_path = ["_templates"]
exclude_patterns = ["_build", "**/README.md"]
nitpicky = False
# |Y|, |P| and |S| are the papers' notation (landmark, pilot and sample counts): docstrings
# write them plainly, so in reST they are substitutions that print themselves.
rst_prolog = "\n".join(f".. |{s}| replace:: \\|{s}\\|" for s in ("Y", "P", "S", "Y~")) + "\n"

# -- MyST (the Markdown pages) ------------------------------------------------------------
myst_enable_extensions = ["colon_fence", "dollarmath", "amsmath", "deflist"]
myst_heading_anchors = 3

# -- autodoc / autosummary / numpydoc -----------------------------------------------------
autosummary_generate = True
autosummary_imported_members = True
autodoc_default_options = {"members": True}
autodoc_typehints = "none"  # numpydoc's Parameters section already gives the types
autodoc_member_order = "bysource"
numpydoc_show_class_members = False  # the class template lists the members
numpydoc_class_members_toctree = False
# Types in Parameters/Returns/Attributes become links: only the words aliased here (the
# rest, "of", "shape", "default", stay text). kernelscale's classes are added below.
numpydoc_xref_param_type = True
numpydoc_xref_ignore = "all"
numpydoc_xref_aliases = {
    **{name: f":class:`{name}`" for name in ("int", "float", "str", "bool", "dict", "list",
                                             "tuple")},
    "None": ":data:`None`", "callable": ":func:`callable`",
    "ndarray": "numpy.ndarray", "array": "numpy.ndarray", "array-like": "numpy.typing.ArrayLike",
    "Generator": "numpy.random.Generator", "RandomState": "numpy.random.RandomState",
    "sparse matrix": "scipy.sparse.csr_matrix", "CSR": "scipy.sparse.csr_matrix",
    "DataFrame": "pandas.DataFrame", "distributed.Client": "distributed.Client",
    "Client": "distributed.Client", "dask array": "dask.array.Array",
}

# -- sphinx-gallery (examples/ at the repository root, run at build time) ------------------
sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "abort_on_example_error": True,
    "only_warn_on_example_error": False,
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    "plot_gallery": "True",
    "reference_url": {"kernelscale": None},
    # "Examples using this class": each API page ends with the gallery examples that use it.
    "doc_module": ("kernelscale",),
    "backreferences_dir": "gen_modules/backreferences",
    "matplotlib_animations": False,
    "write_computation_times": False,
}

# -- sphinx-copybutton: copy the code, not the prompts or the output ----------------------
copybutton_prompt_text = r">>> |\.\.\. |\$ "
copybutton_prompt_is_regexp = True

# -- HTML ----------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"kernelscale {release}"
html_static_path = ["_static"]
html_css_files = ["kernelscale.css"]
html_theme_options = {
    "navbar_align": "left",
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": [],
}
# No left column where it would be empty (the landing pages), or where it would squeeze a
# wide figure (the budget page's grid of 20 panels; the results pages, whose left column
# would list all 50 of them: the results index does).
html_sidebars = {"index": [], "auto_examples/index": [], "getting_started": [],
                 "budget": [], "results/*": []}
# A code block with no language is program output (a ledger, a plan): plain text, not Python.
highlight_language = "text"
html_show_sourcelink = False

# -- links to Python, NumPy, SciPy, scikit-learn, pandas, Dask -------------------------------
# The build never touches the network: intersphinx reads small inventories written here
# from the table in inventories.py (the pages they link to are the projects' own, online).
sys.path.insert(0, str(Path(__file__).resolve().parent))
import inventories  # noqa: E402

intersphinx_mapping = inventories.write_inventories(Path(__file__).resolve().parent)
intersphinx_disabled_reftypes = []

# -- the API reference: generated from every public module's __all__ ----------------------
import apigen  # noqa: E402

apigen.write_pages()
numpydoc_xref_aliases.update(apigen.class_aliases())

import disclosuregen  # noqa: E402
import resultsgen  # noqa: E402

resultsgen.write_pages()
disclosuregen.write_table()  # docs/flower.md's table of what each protocol discloses

# Each estimator's page ends with its paper and the user-guide pages that explain it.
ESTIMATOR_LINKS = {
    "DistributedKernelPCA": (
        "paper-001", ":doc:`/getting_started`, :doc:`/methods`, :doc:`/budget`, "
        ":doc:`/communication`, "
        ":doc:`/auto_examples/plot_1_first_fit`, :doc:`/auto_examples/plot_2_word_budget`"),
    "VerticalKernelPCA": (
        "paper-002", ":doc:`/vertical`, :doc:`/auto_examples/plot_3_vertical_parties`"),
    "FederatedKernelKMeans": (
        "paper-003", ":doc:`/federated`, :doc:`/flower`, "
        ":doc:`/auto_examples/plot_4_federated_dropout`"),
    "DistributedSpectralClustering": ("paper-001", ":doc:`/federated`"),
    "StreamingKernelPCA": (
        "paper-004", ":doc:`/streaming`, :doc:`/auto_examples/plot_5_stream_merge`"),
}


def _append_links(app, what, name, obj, options, lines):
    short = name.rsplit(".", 1)[-1]
    if what != "class" or short not in ESTIMATOR_LINKS:
        return
    paper, guide = ESTIMATOR_LINKS[short]
    lines += ["", ".. rubric:: Paper and user guide", "",
              f"Paper: :ref:`{paper}` (what it specifies and how our runs compare). "
              f"User guide: {guide}.", ""]


ALIASES = apigen.public_aliases()
SKLEARN_REF = re.compile(r":ref:`([^`<]+?)\s*<[^>]+>`|:ref:`([^`]+)`")


def _unlink_sklearn_refs(app, what, name, obj, options, lines):
    """Inherited scikit-learn methods cite labels of scikit-learn's own site: keep the text."""
    if not (getattr(obj, "__module__", None) or "").startswith("sklearn"):
        return
    lines[:] = [SKLEARN_REF.sub(lambda m: m.group(1) or "scikit-learn's documentation", line)
                for line in lines]


def _append_examples(app, what, name, obj, options, lines):
    """End each class and function page with the gallery examples that use it (any alias)."""
    if what not in ("class", "exception", "function") or name not in ALIASES:
        return
    short = name.rsplit(".", 1)[-1]
    lines += ["", f".. minigallery:: {' '.join(ALIASES[name])}",
              f"   :add-heading: Gallery examples using ``{short}``", ""]


def setup(app):
    app.connect("autodoc-process-docstring", _unlink_sklearn_refs, priority=400)
    app.connect("autodoc-process-docstring", _append_links, priority=900)
    app.connect("autodoc-process-docstring", _append_examples, priority=950)
