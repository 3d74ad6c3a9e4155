// Real chat templates shared by the tokenizer tests (copied verbatim from the
// models' tokenizer_config.json; JSON escapes kept as C++ escapes for one-line
// templates, multi-line ones as raw strings).
#pragma once

namespace chimera::tokenizer::chat_test {

// meta-llama/Meta-Llama-3-8B-Instruct; GSAI-ML/LLaDA-8B-Instruct ships the same template.
inline const char* const kLlama3 =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
    "message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 "
    "%}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";

// microsoft/Phi-3-mini-4k-instruct
inline const char* const kPhi3 =
    "{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\n' + message['content'] + "
    "'<|end|>\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\n' + message['content'] + '<|end|>\n'}}{% elif "
    "message['role'] == 'assistant' %}{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}{% endif %}{% endfor "
    "%}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}";

// microsoft/Phi-4-mini-instruct
inline const char* const kPhi4Mini =
    "{% for message in messages %}{% if message['role'] == 'system' and 'tools' in message and message['tools'] is "
    "not none %}{{ '<|' + message['role'] + '|>' + message['content'] + '<|tool|>' + message['tools'] + '<|/tool|>' "
    "+ '<|end|>' }}{% else %}{{ '<|' + message['role'] + '|>' + message['content'] + '<|end|>' }}{% endif %}{% "
    "endfor %}{% if add_generation_prompt %}{{ '<|assistant|>' }}{% else %}{{ eos_token }}{% endif %}";

// teknium/OpenHermes-2.5-Mistral-7B (plain ChatML)
inline const char* const kChatML =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + "
    "'\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

// ibm-granite/granite-4.0-h-micro / granite-4.0-h-tiny (the template embedded in the
// granite-4.0-h-micro GGUF: 6418 characters, with the default system message).
inline const char* const kGranite4 = R"JINJA({%- set tools_system_message_prefix = 'You are a helpful assistant with access to the following tools. You may call one or more tools to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>'  %}
{%- set tools_system_message_suffix = '\n</tools>\n\nFor each tool call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>. If a tool does not exist in the provided list of tools, notify the user that you do not have the ability to fulfill the request.' %}
{%- set documents_system_message_prefix = 'You are a helpful assistant with access to the following documents. You may use one or more documents to assist with the user query.\n\nYou are given a list of documents within <documents></documents> XML tags:\n<documents>' %}
{%- set documents_system_message_suffix = '\n</documents>\n\nWrite the response to the user\'s input by strictly aligning with the facts in the provided documents. If the information needed to answer the question is not available in the documents, inform the user that the question cannot be answered based on the available data.' %}
{%- set g4_default_system_message = 'You are a helpful assistant. Please ensure responses are professional, accurate, and safe.' %}
{%- if available_tools is defined and available_tools %}
    {%- set tools = available_tools %}
{%- endif %}
{%- set ns = namespace(tools_system_message=tools_system_message_prefix,
                       documents_system_message=documents_system_message_prefix,
                       default_system_message=g4_default_system_message,
                       system_message=''
                       ) %}
{%- if tools %}
    {%- for tool in tools %}
        {%- set ns.tools_system_message = ns.tools_system_message + '\n' + (tool | tojson) %}
    {%- endfor %}
    {%- set ns.tools_system_message = ns.tools_system_message + tools_system_message_suffix %}
{%- else %}
    {%- set ns.tools_system_message = '' %}
{%- endif %}
{%- if documents %}
    {%- for document in documents %}
        {%- set ns.documents_system_message = ns.documents_system_message + '\n' + (document | tojson) %}
    {%- endfor %}
    {%- set ns.documents_system_message = ns.documents_system_message + documents_system_message_suffix %}
{%- else %}
    {%- set ns.documents_system_message = '' %}
{%- endif %}
{%- if messages[0].role == 'system' %}
    {%- if messages[0].content is string %}
        {%- set ns.system_message = messages[0].content %}
    {%- elif messages[0].content is iterable %}
        {%- for entry in messages[0].content %}
            {%- if entry.type== 'text' %}
                {%- if ns.system_message != '' %}
                    {%- set ns.system_message = ns.system_message + '\n' %}
                {%- endif %}
                {%- set ns.system_message = ns.system_message + entry.text %}
            {%- endif %}
        {%- endfor %}
    {%- endif %}
    {%- if tools and documents %}
        {%- set ns.system_message = ns.system_message + '\n\n' +  ns.tools_system_message + '\n\n' + ns.documents_system_message %}
    {%- elif tools %}
        {%- set ns.system_message = ns.system_message + '\n\n' + ns.tools_system_message %}
    {%- elif documents %}
        {%- set ns.system_message = ns.system_message + '\n\n' + ns.documents_system_message %}
    {%- endif %}
{%- else %}
    {%- if tools and documents %}
        {%- set ns.system_message = ns.tools_system_message + '\n\n' + ns.documents_system_message  %}
    {%- elif tools %}
        {%- set ns.system_message = ns.tools_system_message %}
    {%- elif documents %}
        {%- set ns.system_message = ns.documents_system_message %}
    {%- endif %}
{%- endif %}
{%- if ns.system_message %}
    {{- '<|start_of_role|>system<|end_of_role|>' + ns.system_message + '<|end_of_text|>\n' }}
{%- else %}
    {{- '<|start_of_role|>system<|end_of_role|>' + ns.default_system_message + '<|end_of_text|>\n' }}
{%- endif %}
{%- for message in messages %}
    {%- set content = namespace(val='') %}
    {%- if message.content is string %}
        {%- set content.val = message.content %}
    {%- else %}
        {%- if message.content is iterable %}
            {%- for entry in message.content %}
                {%- if entry.type== 'text' %}
                    {%- if content.val != '' %}
                        {%- set content.val = content.val + '\n' %}
                    {%- endif %}
                    {%- set content.val = content.val + entry.text %}
                {%- endif %}
            {%- endfor %}
        {%- endif %}
    {%- endif %}
    {%- if (message.role == 'user') or (message.role == 'system' and not loop.first) %}
        {{- '<|start_of_role|>' + message.role + '<|end_of_role|>' + content.val + '<|end_of_text|>\n' }}
    {%- elif message.role == 'assistant' %}
        {{- '<|start_of_role|>' + message.role + '<|end_of_role|>' + content.val }}
        {%- if message.tool_calls %}
            {%- for tool_call in message.tool_calls %}
                {%- if (loop.first and content.val) or (not loop.first) %}
                    {{- '\n' }}
                {%- endif %}
                {%- if tool_call.function %}
                    {%- set tool_call = tool_call.function %}
                {%- endif %}
                {{- '<tool_call>\n{"name": "' }}
                {{- tool_call.name }}
                {{- '", "arguments": ' }}
                {%- if tool_call.arguments is string %}
                    {{- tool_call.arguments }}
                {%- else %}
                    {{- tool_call.arguments | tojson }}
                {%- endif %}
                {{- '}\n</tool_call>' }}
            {%- endfor %}
        {%- endif %}
        {{- '<|end_of_text|>\n' }}
    {%- elif message.role == 'tool' %}
        {%- if loop.first or (messages[loop.index0 - 1].role != 'tool') %}
            {{- '<|start_of_role|>user<|end_of_role|>' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- content.val }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != 'tool') %}
            {{- '<|end_of_text|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_of_role|>assistant<|end_of_role|>' }}
{%- endif %})JINJA";

}  // namespace chimera::tokenizer::chat_test
