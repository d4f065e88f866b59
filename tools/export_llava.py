#!/usr/bin/env python3
"""Launcher of era_tools.export_llava. No sys.path edit: Python puts this script's
folder, tools/, first on sys.path."""
from era_tools.export_llava import main

raise SystemExit(main())
