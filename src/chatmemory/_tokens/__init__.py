"""Token counting: the estimator protocol, the exact offline OpenAI estimator, an approximate one."""
