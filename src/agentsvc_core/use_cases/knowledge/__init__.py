"""Knowledge (docs/knowledge.md): documents an organization, an agent or a thread
gives its agents to search.

- ``documents.py``: upload, list, delete and reindex, the indexing job and the
  hybrid search (``Knowledge``).
- ``chunking.py``: a parsed document cut into chunks (pure).
- ``tools.py``: the ``knowledge_search`` tool the model calls.
"""
