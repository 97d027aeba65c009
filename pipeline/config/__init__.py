"""Pipeline settings: the dataclasses and presets, config files, Beam options, the reference."""
