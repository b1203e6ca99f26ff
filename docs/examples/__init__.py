"""The examples docs/architecture.md shows, as code that tests/docs/test_architecture_examples.py imports and runs, so
that the document cannot drift from the code it describes."""
