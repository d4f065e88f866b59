#!/usr/bin/env python3
"""Launcher of era_tools.make_tiny_llava. No sys.path edit: Python puts this script's
folder, tools/, first on sys.path."""
from era_tools.make_tiny_llava import main

raise SystemExit(main())
