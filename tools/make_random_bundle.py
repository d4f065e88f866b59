#!/usr/bin/env python3
"""Launcher of era_tools.make_random_bundle. No sys.path edit: Python puts this script's
folder, tools/, first on sys.path."""
from era_tools.make_random_bundle import main

raise SystemExit(main())
