"""Likelihood blocks: the reports of one mechanism as the operator the EM engine reads.

Below the mechanisms: a block is linear algebra over arrays (kernels, supports, hashes) and knows no
mechanism; mechanisms build their blocks from these classes.
"""
