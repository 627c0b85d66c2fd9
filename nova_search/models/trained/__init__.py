"""A target model and a draft model trained here, from text every machine has, so that speculation
is measured on predictions with structure (random weights repeat themselves and say nothing about a
drafter). ``build.build_trained_pair`` makes the pair; ``corpus`` is the text; ``train.py`` is the
training loop, run by the engine's interpreter."""
