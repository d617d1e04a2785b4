"""A model file built from a configuration class of another module, as transformers'
model files are: the class's literal defaults are a configuration the project states."""
