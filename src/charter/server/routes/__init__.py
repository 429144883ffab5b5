"""The ``/v1`` resources, one module each."""
