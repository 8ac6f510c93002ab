"""The built-in scenarios (`scenario = NAME` in a study), one module each, each joining
BUILTIN_SCENARIOS (scenarios/phases.py) itself, in the order of their modules' names."""
