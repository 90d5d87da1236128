/* SPDX-License-Identifier: Apache-2.0 */
// Only what Swift cannot import from <dbus/dbus.h>: the DBUS_TYPE_* and other
// constants are macros with casts, which the Clang importer skips. Every symbol
// here carries the module prefix.
#ifndef CWORMHOLEDBUS_SHIM_H
#define CWORMHOLEDBUS_SHIM_H

#include <dbus/dbus.h>
static const int cwormhole_type_invalid = DBUS_TYPE_INVALID;
static const int cwormhole_type_byte = DBUS_TYPE_BYTE;
static const int cwormhole_type_boolean = DBUS_TYPE_BOOLEAN;
static const int cwormhole_type_int16 = DBUS_TYPE_INT16;
static const int cwormhole_type_uint16 = DBUS_TYPE_UINT16;
static const int cwormhole_type_int32 = DBUS_TYPE_INT32;
static const int cwormhole_type_uint32 = DBUS_TYPE_UINT32;
static const int cwormhole_type_int64 = DBUS_TYPE_INT64;
static const int cwormhole_type_uint64 = DBUS_TYPE_UINT64;
static const int cwormhole_type_double = DBUS_TYPE_DOUBLE;
static const int cwormhole_type_string = DBUS_TYPE_STRING;
static const int cwormhole_type_object_path = DBUS_TYPE_OBJECT_PATH;
static const int cwormhole_type_signature = DBUS_TYPE_SIGNATURE;
static const int cwormhole_type_array = DBUS_TYPE_ARRAY;
static const int cwormhole_type_variant = DBUS_TYPE_VARIANT;
static const int cwormhole_type_struct = DBUS_TYPE_STRUCT;
static const int cwormhole_type_dict_entry = DBUS_TYPE_DICT_ENTRY;

static const int cwormhole_message_type_method_call = DBUS_MESSAGE_TYPE_METHOD_CALL;
static const int cwormhole_message_type_method_return = DBUS_MESSAGE_TYPE_METHOD_RETURN;
static const int cwormhole_message_type_error = DBUS_MESSAGE_TYPE_ERROR;
static const int cwormhole_message_type_signal = DBUS_MESSAGE_TYPE_SIGNAL;

static const int cwormhole_timeout_use_default = DBUS_TIMEOUT_USE_DEFAULT;

#endif
