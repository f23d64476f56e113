"""Data: versioned file formats, reports and their perturbation, aggregation engines, observations,
and the bundled real data sets."""
