"""Token counting: the estimator protocol, the exact offline OpenAI estimator, an estimate."""

from .approximate import ApproximateTokenCountEstimator
from .estimator import TokenCountEstimator
from .openai import OpenAiTokenCountEstimator

__all__ = ["ApproximateTokenCountEstimator", "OpenAiTokenCountEstimator", "TokenCountEstimator"]
