"""Placeholder: filled in by the work on this command."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("kubeapi", help="(not built yet)")
    parser.set_defaults(func=lambda _args: 2)
