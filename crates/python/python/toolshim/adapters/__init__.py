"""Adapters that put toolshim's parser behind other projects' interfaces.

Each module imports its host only when it is imported itself, so ``import toolshim`` never
pulls in vLLM, SGLang or canitoolcall:

- :mod:`toolshim.adapters.vllm`: a vLLM tool parser (``--tool-parser-plugin
  toolshim.adapters.vllm --tool-call-parser toolshim``).
- :mod:`toolshim.adapters.sglang`: an SGLang-shaped ``FunctionCallParser``.
- :mod:`toolshim.adapters.canitoolcall`: a canitoolcall engine adapter
  (``canitoolcall run --engine toolshim.adapters.canitoolcall:ToolshimAdapter``).
"""
