"""AI services: declare what an assistant does as a typed Protocol, get an object that calls the
model with per-user memory, prompt templates, structured output, streaming and moderation."""
