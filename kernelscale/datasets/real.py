"""Real data sets bundled with kernelscale: letter, satellite, spam, insurance, musk, income,
shuttle, dna.

The files (``kernelscale/datasets/data/*.csv.gz``, provenance in the
``README.md`` beside them) ship with the package, so these loaders never touch
the network. Values are returned exactly as in the UCI data (the papers do not
scale their data); ``standardize=True`` gives each feature zero mean and unit
variance instead.

======================  ================  =======  ==============================
loader                  samples x feat.   classes  UCI data set
======================  ================  =======  ==============================
:func:`load_letter`     20,000 x 16       26       Letter Recognition
:func:`load_satellite`  6,435 x 36        6        Statlog (Landsat Satellite)
:func:`load_spam`       4,601 x 57        2        Spambase
:func:`load_insurance`  9,822 x 85        2        Insurance Company (CoIL 2000)
:func:`load_musk`       476 x 166         2        Musk (Version 1)
:func:`load_income`     6,876 x 43        9        Marketing (income; kernlab)
:func:`load_shuttle`    14,500 x 9        7        Statlog (Shuttle), test part
:func:`load_dna`        3,186 x 180       3        Statlog (DNA; mlbench)
======================  ================  =======  ==============================
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from importlib import resources

import numpy as np

__all__ = ["BUNDLED", "load_dna", "load_income", "load_insurance", "load_letter", "load_musk",
           "load_satellite", "load_shuttle", "load_spam"]


@dataclass(frozen=True)
class BundledSet:
    """What a bundled file must hold: its name, shape and number of classes."""

    filename: str
    n_samples: int
    n_features: int
    n_classes: int


#: The bundled sets by name; the loaders check every file against its entry.
BUNDLED = {
    "letter": BundledSet("letter.csv.gz", 20_000, 16, 26),
    "satellite": BundledSet("satellite.csv.gz", 6_435, 36, 6),
    "spam": BundledSet("spam.csv.gz", 4_601, 57, 2),
    "insurance": BundledSet("insurance.csv.gz", 9_822, 85, 2),
    "musk": BundledSet("musk.csv.gz", 476, 166, 2),
    "income": BundledSet("income.csv.gz", 6_876, 43, 9),
    "shuttle": BundledSet("shuttle.csv.gz", 14_500, 9, 7),
    "dna": BundledSet("dna.csv.gz", 3_186, 180, 3),
}


def _read_bundled(name: str, standardize: bool) -> tuple[np.ndarray, np.ndarray]:
    """Parse one bundled file into (X float64, y class names), checked against BUNDLED.

    The project's :func:`~kernelscale.datasets.load_csv` does not fit: it reads
    plain text files only (not gzip) and parses every column, the label too, as
    a number, while these labels are class names ("A", "grey soil", "spam").
    So the label is split off each line here and numpy parses the features.
    """
    spec = BUNDLED[name]
    resource = resources.files(__package__).joinpath("data", spec.filename)
    with resource.open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as text:
        header = text.readline().rstrip("\n").split(",")
        lines = text.read().splitlines()
    where = f"{spec.filename} (bundled with kernelscale.datasets)"
    if header[-1] != "label":
        raise ValueError(f"{where}: last column is {header[-1]!r}, expected 'label'")
    features, labels = zip(*(line.rsplit(",", 1) for line in lines), strict=True)
    X = np.loadtxt(features, delimiter=",", dtype=np.float64, ndmin=2)
    y = np.array(labels)
    n_classes = np.unique(y).size
    if X.shape != (spec.n_samples, spec.n_features) or n_classes != spec.n_classes:
        raise ValueError(
            f"{where}: expected {spec.n_samples} x {spec.n_features} with {spec.n_classes} "
            f"classes, read {X.shape[0]} x {X.shape[1]} with {n_classes}; reinstall kernelscale"
        )
    if not np.isfinite(X).all():
        raise ValueError(f"{where}: NaN or inf values; reinstall kernelscale")
    if standardize:
        from sklearn.preprocessing import scale

        X = scale(X)
    return X, y


def load_letter(standardize: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """UCI Letter Recognition: 20,000 letter images as 16 integer features, 26 classes.

    Each row describes a black-and-white capital letter (20 fonts, randomly
    distorted) by 16 statistics of its pixels, each an integer from 0 to 15.
    Frey and Slate (1991). Bundled, nothing is downloaded.

    Parameters
    ----------
    standardize : bool, default=False
        Scale each feature to zero mean and unit variance. False keeps the
        UCI values unchanged, as the papers use them.

    Returns
    -------
    X : ndarray of shape (20000, 16), float64
    y : ndarray of shape (20000,), str
        The letter, ``'A'`` to ``'Z'``. ``np.unique(y, return_inverse=True)``
        gives integer codes.
    """
    return _read_bundled("letter", standardize)


def load_satellite(standardize: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """UCI Statlog (Landsat Satellite): 6,435 pixels' 3x3 neighbourhoods in 4 bands, 6 classes.

    Each row holds the 4 spectral values (bytes; 27 to 157 here) of the 9 pixels of a 3 x 3
    neighbourhood in a Landsat image (36 features); the class is the soil type
    of the central pixel. Bundled, nothing is downloaded.

    Parameters
    ----------
    standardize : bool, default=False
        Scale each feature to zero mean and unit variance. False keeps the
        UCI values unchanged.

    Returns
    -------
    X : ndarray of shape (6435, 36), float64
    y : ndarray of shape (6435,), str
        The soil type: ``'cotton crop'``, ``'damp grey soil'``, ``'grey soil'``,
        ``'red soil'``, ``'vegetation stubble'`` or ``'very damp grey soil'``.
    """
    return _read_bundled("satellite", standardize)


def load_spam(standardize: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """UCI Spambase: 4,601 e-mails as 57 word, character and capital-run statistics, 2 classes.

    48 word and 6 character frequencies (percentages, 0 to 100) and 3
    statistics of runs of capital letters (average, longest, total; up to
    15,841). The features' scales differ by four orders of magnitude, so
    distance-based kernels on the raw values are dominated by the capital-run
    columns. Bundled, nothing is downloaded.

    Parameters
    ----------
    standardize : bool, default=False
        Scale each feature to zero mean and unit variance. False keeps the
        UCI values unchanged.

    Returns
    -------
    X : ndarray of shape (4601, 57), float64
    y : ndarray of shape (4601,), str
        ``'spam'`` or ``'nonspam'``.
    """
    return _read_bundled("spam", standardize)



def load_insurance(standardize: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """UCI Insurance Company Benchmark (CoIL 2000): 9,822 customers, 85 features, 2 classes.

    Paper 001's own "insurance" set (its Table 1: 9,822 x 85; Figures 2 and 3):
    the training and test parts of the CoIL 2000 data together. Each row
    describes a customer by 43 socio-demographic statistics of their postal
    code and 42 counts and contribution classes of their insurance policies.
    Most columns are classes coded as integers (0-based level codes of R's
    factors; see ``datasets/data/README.md`` for the two nominal columns,
    customer subtype and main type, coded in the alphabetical order of their
    labels). The label says whether the customer holds a caravan policy; it is
    rare (586 of 9,822). van der Putten and van Someren (2000). Bundled,
    nothing is downloaded.

    Parameters
    ----------
    standardize : bool, default=False
        Scale each feature to zero mean and unit variance. False keeps the
        coded values unchanged, as paper 001 uses them.

    Returns
    -------
    X : ndarray of shape (9822, 85), float64
    y : ndarray of shape (9822,), str
        ``'insurance'`` (holds a caravan policy) or ``'noinsurance'``.
    """
    return _read_bundled("insurance", standardize)


def load_musk(standardize: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """UCI Musk (Version 1): 476 conformations of 92 molecules, 166 integer features, 2 classes.

    Each row is one conformation of a molecule: 162 distances from a point of
    the molecule to its surface along fixed rays and 4 features of an oxygen
    atom, integers from -348 to 336. A molecule has few conformations
    (1 to 40), so the rows form small tight groups with much space between
    them. Dietterich, Lathrop and Lozano-Perez (1997); kernlab's ``musk``.
    Bundled, nothing is downloaded.

    Parameters
    ----------
    standardize : bool, default=False
        Scale each feature to zero mean and unit variance.

    Returns
    -------
    X : ndarray of shape (476, 166), float64
    y : ndarray of shape (476,), str
        ``'musk'`` (207) or ``'nonmusk'`` (269).
    """
    return _read_bundled("musk", standardize)


def load_income(standardize: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Marketing income survey: 6,876 households, 43 mostly binary features, 9 income classes.

    kernlab's ``income`` (a survey of shopping-mall customers in the San
    Francisco Bay Area, 1987; Hastie, Tibshirani and Friedman, *The Elements
    of Statistical Learning*), rows with a missing answer left out. Five
    ordered answers are level codes from 0 (age class, education, years in
    the area, household size, children under 18); the eight nominal ones (sex,
    marital status, occupation, dual incomes, householder status, home type,
    ethnic class, language) are one-hot: 38 binary columns, some of them rare
    (12 East Indian and 88 Pacific Islander households); 5,631 of the rows are
    distinct.
    Coding in ``datasets/data/README.md``. Bundled, nothing is downloaded.

    Parameters
    ----------
    standardize : bool, default=False
        Scale each feature to zero mean and unit variance.

    Returns
    -------
    X : ndarray of shape (6876, 43), float64
    y : ndarray of shape (6876,), str
        The annual household income class, ``'-10.000)'`` (below $10,000) to
        ``'[75.000-'`` ($75,000 or more).
    """
    return _read_bundled("income", standardize)


def load_shuttle(standardize: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Statlog (Shuttle), its test part: 14,500 sensor readings of the space shuttle, 9
    integer features, 7 classes of very unequal size.

    UCI's test part (rows 43,501-58,000 of mlbench's ``Shuttle``), values
    unchanged. 79% of the rows are ``'Rad.Flow'``, and four classes hold 2, 4,
    13 and 39 rows; the features reach far from their bulk (the sixth from
    -26,739 to 15,164 around a median of 0), so after standardising a few
    rows lie far from all others. Catlett (1991). Bundled, nothing is
    downloaded.

    Parameters
    ----------
    standardize : bool, default=False
        Scale each feature to zero mean and unit variance.

    Returns
    -------
    X : ndarray of shape (14500, 9), float64
    y : ndarray of shape (14500,), str
        ``'Rad.Flow'`` (11,478), ``'High'`` (2,155), ``'Bypass'`` (809),
        ``'Fpv.Open'`` (39), ``'Fpv.Close'`` (13), ``'Bpv.Close'`` (4) or
        ``'Bpv.Open'`` (2).
    """
    return _read_bundled("shuttle", standardize)


def load_dna(standardize: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Statlog (DNA): 3,186 primate splice-junction gene sequences, 180 binary features,
    3 classes.

    Each row is a window of 60 nucleotides, each nucleotide coded by three
    binary indicator variables (mlbench's ``DNA``, as the Statlog project coded
    UCI's splice-junction data); 3,001 of the rows are distinct. Noordewier,
    Towell and Shavlik (1991). Bundled, nothing is downloaded.

    Parameters
    ----------
    standardize : bool, default=False
        Scale each feature to zero mean and unit variance.

    Returns
    -------
    X : ndarray of shape (3186, 180), float64
        Zeros and ones.
    y : ndarray of shape (3186,), str
        ``'ei'`` (exon/intron boundary, 767), ``'ie'`` (intron/exon, 765) or
        ``'n'`` (neither, 1,654).
    """
    return _read_bundled("dna", standardize)
