"""Everything the lessons use that is not their idea.

Its reading guide, which module to open after which lesson, is README.md in this folder.
"""
