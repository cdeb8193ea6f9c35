"""Lambda entry points. Thin: parse, build the shell's objects, call the core, log."""
