"""sage2 where its users already are. Each submodule is imported on demand and imports its
package only then (``import sage2`` never imports transformers, diffusers or yunchang):

    sage2.integrations.transformers   "sage2" for transformers' attn_implementation=...
    sage2.integrations.diffusers      "sage2" attention backend of diffusers' dispatcher
    sage2.integrations.yunchang       sage2 as the attention of yunchang's USP (Ulysses / ring / hybrid)
"""
