"""The Flux task layer: the task class, its options, the built-in tasks and their data paths.

* :mod:`~flux_chroma.tasks.task`: :class:`~flux_chroma.tasks.task.ChromaTask`, a Flux task
  carrying flux-chroma options (retry classification, timeouts, credential scrubbing).
* :mod:`~flux_chroma.tasks.options`: :class:`~flux_chroma.tasks.options.ChromaOptions`.
* :mod:`~flux_chroma.tasks.builtin`: ``embed_and_add``, ``query``, ``list_collections``,
  ``delete_collection``, ``delete_documents``.
* :mod:`~flux_chroma.tasks.validation` -> :mod:`~flux_chroma.tasks.writer` /
  :mod:`~flux_chroma.tasks.reader`: check inputs, then write or query a resolved collection.

Nothing here is imported eagerly; import the module you need (or use :mod:`flux_chroma`).
"""
