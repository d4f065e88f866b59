#!/usr/bin/env python3
"""Launcher of era_tools.bench_llamacpp. No sys.path edit: Python puts this script's
folder, tools/, first on sys.path."""
from era_tools.bench_llamacpp import main

raise SystemExit(main())
