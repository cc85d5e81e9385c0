"""An argparse script for the validate tests (P944); it is only read, never run."""

import argparse

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=0.1)
args = parser.parse_args()
