#!/usr/bin/env python3
"""Launcher of era_tools.compare_decoders. No sys.path edit: Python puts this script's
folder, tools/, first on sys.path."""
from era_tools.compare_decoders import main

raise SystemExit(main())
