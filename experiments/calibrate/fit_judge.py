"""The judge side of calibration: judge accuracy and correlation, evaluator noise, check
coverage, rollout optimism and reflection gain (stub: extractors and fits follow)."""

from __future__ import annotations
