"""Chat templates with tools for the tiny test models: one per tool-call style, ChatML-framed.

Jinja templates in the Hugging Face ``tokenizer.chat_template`` sense, rendered with ``messages``, ``tools``
(OpenAI function entries, :meth:`rockroll.envs.tools.Tool.to_openai`) and ``add_generation_prompt``. Each frames
turns with the tiny tokenizers' markers (``<|im_start|>{role}\\n ... <|im_end|>\\n``) and writes the tools and
the assistant's calls the way its style's models do, so the parser of the same name
(:data:`rockroll.agentrl.tools.TOOL_PARSERS`) reads back what the template writes:

* ``hermes`` (Hermes / Qwen2.5): the tools' JSON inside ``<tools></tools>`` in the system message; each call as
  ``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`` after the turn's text, one per line; a run of
  ``tool`` messages as ``<tool_response>`` blocks inside one ``user`` turn. Without tools and tool messages it
  renders exactly as the tiny ChatML template (``tiny.CHAT_TEMPLATE``).
* ``llama3_json`` (Llama 3.x JSON calls): the calls as the whole message, ``{"name": ..., "parameters": {...}}``
  joined by ``"; "`` (the turn's text is not rendered beside calls, as in Llama's own template); each result as
  an ``ipython`` turn.
* ``mistral``: the turn's text, then ``[TOOL_CALLS]`` and a JSON list of ``{"name", "arguments"}``; each result
  as ``[TOOL_RESULTS]{"call_id": ..., "content": ...}[/TOOL_RESULTS]`` in a ``tool`` turn.

Only the framing is the tiny models' own: a real Llama or Mistral checkpoint's template uses its own special
tokens around the same call text. Arguments may be a mapping or (as the OpenAI API sends them) a JSON string,
written as it is. Every template renders an assistant turn the way its generation prompt begins it, so
full-history prompts extend each other with tool messages in between.
"""

from __future__ import annotations

__all__ = ["HERMES_TEMPLATE", "LLAMA3_JSON_TEMPLATE", "MISTRAL_TEMPLATE", "TOOL_TEMPLATES"]

#: ``function`` of an OpenAI ``tool_calls`` entry (or the entry itself) and its arguments as JSON text
_CALL_PARTS = (
    "{%- set f = tool_call.function if tool_call.function is defined else tool_call %}"
    "{%- set args = f.arguments if f.arguments is defined else {} %}"
    "{%- set args_json = args if args is string else (args | tojson) %}"
)
#: a plain message (user, system after the first, any other role)
_PLAIN = "{{- '<|im_start|>' + message.role + '\\n' + (message.content or '') + '<|im_end|>\\n' }}"
_GENERATION = "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
#: the content of a tool message as text
_RESULT = "{%- set result = message.content if message.content is string else (message.content | tojson) %}"

HERMES_TEMPLATE = (
    "{%- if tools %}"
    "{{- '<|im_start|>system\\n' }}"
    "{%- if messages and messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}"
    "{{- '# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n"
    "You are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' + (tool | tojson) }}{%- endfor %}"
    "{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within "
    '<tool_call></tool_call> XML tags:\\n<tool_call>\\n{"name": <function-name>, "arguments": <args-json-object>}'
    "\\n</tool_call><|im_end|>\\n' }}"
    "{%- elif messages and messages[0].role == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'system' %}{%- if not loop.first %}" + _PLAIN + "{%- endif %}"
    "{%- elif message.role == 'assistant' and message.tool_calls %}"
    "{{- '<|im_start|>assistant' }}"
    "{%- if message.content %}{{- '\\n' + message.content }}{%- endif %}"
    "{%- for tool_call in message.tool_calls %}"
    + _CALL_PARTS
    + "{{- '\\n<tool_call>\\n{\"name\": ' + (f.name | tojson) + ', \"arguments\": ' + args_json + '}\\n</tool_call>' }}"
    "{%- endfor %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- elif message.role == 'tool' %}"
    + _RESULT
    + "{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' + result + '\\n</tool_response>' }}"
    "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- else %}" + _PLAIN + "{%- endif %}"
    "{%- endfor %}" + _GENERATION
)

LLAMA3_JSON_TEMPLATE = (
    "{%- set system = messages[0].content if messages and messages[0].role == 'system' else '' %}"
    "{%- if tools %}"
    "{{- '<|im_start|>system\\n' }}{%- if system %}{{- system + '\\n\\n' }}{%- endif %}"
    "{{- 'Given the following functions, please respond with a JSON for a function call with its proper "
    "arguments that best answers the given prompt.\\n\\nRespond in the format "
    '{"name": function name, "parameters": dictionary of argument name and its value}. '
    "Several calls are separated by semicolons. Do not use variables.' }}"
    "{%- for tool in tools %}{{- '\\n\\n' + (tool | tojson(indent=4)) }}{%- endfor %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- elif system %}{{- '<|im_start|>system\\n' + system + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'system' %}{%- if not loop.first %}" + _PLAIN + "{%- endif %}"
    "{%- elif message.role == 'assistant' and message.tool_calls %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- for tool_call in message.tool_calls %}" + _CALL_PARTS + "{%- if not loop.first %}{{- '; ' }}{%- endif %}"
    "{{- '{\"name\": ' + (f.name | tojson) + ', \"parameters\": ' + args_json + '}' }}"
    "{%- endfor %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- elif message.role == 'tool' %}" + _RESULT + "{{- '<|im_start|>ipython\\n' + result + '<|im_end|>\\n' }}"
    "{%- else %}" + _PLAIN + "{%- endif %}"
    "{%- endfor %}" + _GENERATION
)

MISTRAL_TEMPLATE = (
    "{%- set system = messages[0].content if messages and messages[0].role == 'system' else '' %}"
    "{%- if tools %}"
    "{{- '<|im_start|>system\\n' }}{%- if system %}{{- system + '\\n\\n' }}{%- endif %}"
    "{{- '[AVAILABLE_TOOLS]' + (tools | tojson) + '[/AVAILABLE_TOOLS]<|im_end|>\\n' }}"
    "{%- elif system %}{{- '<|im_start|>system\\n' + system + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'system' %}{%- if not loop.first %}" + _PLAIN + "{%- endif %}"
    "{%- elif message.role == 'assistant' and message.tool_calls %}"
    "{{- '<|im_start|>assistant\\n' + (message.content or '') + '[TOOL_CALLS][' }}"
    "{%- for tool_call in message.tool_calls %}" + _CALL_PARTS + "{%- if not loop.first %}{{- ', ' }}{%- endif %}"
    "{{- '{\"name\": ' + (f.name | tojson) + ', \"arguments\": ' + args_json + '}' }}"
    "{%- endfor %}"
    "{{- ']<|im_end|>\\n' }}"
    "{%- elif message.role == 'tool' %}"
    + _RESULT
    + "{{- '<|im_start|>tool\\n[TOOL_RESULTS]{\"call_id\": ' + ((message.tool_call_id or '') | tojson) + ', \"content\": ' + (result | tojson) + '}[/TOOL_RESULTS]<|im_end|>\\n' }}"
    "{%- else %}" + _PLAIN + "{%- endif %}"
    "{%- endfor %}" + _GENERATION
)

#: tool-call style (a parser's name) -> its tiny chat template
TOOL_TEMPLATES: dict[str, str] = {
    "hermes": HERMES_TEMPLATE,
    "llama3_json": LLAMA3_JSON_TEMPLATE,
    "mistral": MISTRAL_TEMPLATE,
}
