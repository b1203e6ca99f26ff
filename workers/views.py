"""The two views of a federation's features, by name: the one-hot view (linear and neural families) and the
ordinal view (tree families). :mod:`workers.features` computes them; the names live here, apart from numpy and
pandas, so that the family vocabulary (:mod:`workers.modelio.families`) and the toolkit's command line can name
them."""

ONE_HOT_VIEW = "one_hot"
ORDINAL_VIEW = "ordinal"
FEATURE_VIEWS = (ONE_HOT_VIEW, ORDINAL_VIEW)
