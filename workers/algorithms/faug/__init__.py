"""Federated augmentation (FAug, Jeong et al. 2018, *Communication-Efficient On-Device Machine Learning:
Federated Distillation and Augmentation under Non-IID Private Data*, Section 3): a conditional generator,
trained on seed samples pooled from the silos, that fills in the labels a silo lacks.

Each silo uploads a few *seed* samples of its target labels (the labels it lacks or nearly lacks) and,
to hide which labels those are, *redundant* samples of other labels; the paper's device–server privacy
leakage is |target| / (|target| + |redundant|); what the other silos learn from the published generator is
diluted by every silo's seeds (both in :mod:`~workers.algorithms.faug.leakage`). The server trains a
conditional GAN (Mirza and Osindero 2014) on the pooled seeds and publishes the generator; every silo
generates samples of its target labels and trains on its own data plus those samples.

The package in the order a generator lives:

- :mod:`~workers.algorithms.faug.leakage` and :mod:`~workers.algorithms.faug.work`: what an upload leaks and
  what a training costs, known before anything runs (numpy only: the market reads them without torch);
- :mod:`~workers.algorithms.faug.networks`: the MLP generator and discriminator and the generator's spec;
- :mod:`~workers.algorithms.faug.training`: the GAN's training, with public rows first and a DP-SGD
  discriminator where asked;
- :mod:`~workers.algorithms.faug.generator`: the published generator, its safetensors file and its use;
- :mod:`~workers.algorithms.faug.tabular`: the tabular generator (a CTGAN of our own), published as rows
  (:mod:`~workers.algorithms.faug.samples`) after the seed-copy check (:mod:`~workers.algorithms.faug.copies`).

This file imports nothing, so that reading a leakage, a work estimate or a samples file never loads torch.
"""
