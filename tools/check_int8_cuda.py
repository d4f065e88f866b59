#!/usr/bin/env python3
"""Launcher of era_tools.check_int8_cuda. No sys.path edit: Python puts this script's
folder, tools/, first on sys.path."""
from era_tools.check_int8_cuda import main

raise SystemExit(main())
