"""Test helpers: a stand-in OpenAI-style streaming server (``standin``)."""
