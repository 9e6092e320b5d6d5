"""Test-only support for the OpenRLHF adapter tests (stand-ins, tiny models, fixtures)."""
