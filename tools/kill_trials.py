#!/usr/bin/env python3
"""Launcher of era_tools.kill_trials. No sys.path edit: Python puts this script's
folder, tools/, first on sys.path."""
from era_tools.kill_trials import main

raise SystemExit(main())
