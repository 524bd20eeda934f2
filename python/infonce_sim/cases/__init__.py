"""The lowest layer: case files of every loss family read and checked (case, case_families,
clip_case, ntxent_case, siglip_case, strategy) and the SPEC's torch reading (spec). It imports
nothing of the runtime or the adapters (tests/python/test_import_layers.py)."""
