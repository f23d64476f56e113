"""Foundations every layer may use: errors, input validation, signals, progress, random generators,
the probability simplex. Imports nothing else of localpriv."""
