"""The ``localpriv`` command line: each command parses, calls one library function and renders."""
