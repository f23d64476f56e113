"""Optional integrations that import heavy dependencies of their own (Apache Spark)."""
