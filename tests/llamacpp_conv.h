/* llamacpp_conv.h: the conversation llama.cpp's tests/test-chat-template.cpp renders every
 * template with (main_automated_tests). test_chat.c checks the built-in families with it,
 * test_chat_llamacpp.c the Jinja path. */
#ifndef BG_TEST_LLAMACPP_CONV_H
#define BG_TEST_LLAMACPP_CONV_H

#include "text/chat.h"

static const struct chat_message llamacpp_conv[] = {
    {"system", "You are a helpful assistant"},
    {"user", "Hello"},
    {"assistant", "Hi there"},
    {"user", "Who are you"},
    {"assistant", "   I am an assistant   "},
    {"user", "Another question"},
};
#define LLAMACPP_CONV_N (sizeof llamacpp_conv / sizeof llamacpp_conv[0])

#endif
