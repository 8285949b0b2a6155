/*
 * nif_device.c — devices: moving arrays between the CPU and GPUs, asking
 * where an array lives, whether a device is usable, and a device's memory
 * counters. Devices are integers here (0: cpu, 1 + i: gpu i); Elixir's
 * Emily.Tensor.to_device/2 maps :cpu, :gpu and {:gpu, i} onto them.
 */
#include "emily_device.h"
#include "nif.h"

#include <string.h>

NIF_DECL(to_device) {
    nif_call c = NIF_CALL(env, "to_device");
    em_array *a, *out = NULL;
    int device;
    if (!nif_get_array(&c, argv[0], "tensor", &a) ||
        !nif_get_int(&c, argv[1], "device", &device))
        return c.raised;
    return nif_result(&c, em_to_device(a, device, &out), &out);
}

NIF_DECL(array_device) {
    nif_call c = NIF_CALL(env, "array_device");
    em_array *a;
    if (!nif_get_array(&c, argv[0], "tensor", &a))
        return c.raised;
    return enif_make_int(env, em_array_device(a));
}

/* :cpu when every array of the list lives on the CPU, else the list of
 * their device numbers: Emily.Compiler keys programs by it on each call. */
NIF_DECL(array_devices) {
    nif_call c = NIF_CALL(env, "array_devices");
    ERL_NIF_TERM list = argv[0], head;
    unsigned n;
    if (!enif_get_list_length(env, list, &n))
        return nif_raise_bad_arg(&c, "tensors", "a list of tensors", list);
    bool all_cpu = true;
    ERL_NIF_TERM devices = enif_make_list(env, 0);
    while (enif_get_list_cell(env, list, &head, &list)) {
        em_array *a;
        if (!nif_get_array(&c, head, "tensors", &a))
            return c.raised;
        em_device d = em_array_device(a);
        all_cpu &= d == EM_DEVICE_CPU;
        devices = enif_make_list_cell(env, enif_make_int(env, d), devices);
    }
    if (all_cpu)
        return enif_make_atom(env, "cpu");
    ERL_NIF_TERM ordered;
    enif_make_reverse_list(env, devices, &ordered);
    return ordered;
}

/* :ok, or {:error, reason} (the reason as a binary). */
NIF_DECL(device_available) {
    nif_call c = NIF_CALL(env, "device_available");
    int device;
    if (!nif_get_int(&c, argv[0], "device", &device))
        return c.raised;
    const char *reason = "";
    if (em_device_available(device, &reason))
        return atoms.ok;
    ERL_NIF_TERM bin;
    size_t len = strlen(reason);
    unsigned char *p = enif_make_new_binary(env, len, &bin);
    memcpy(p, reason, len);
    return enif_make_tuple2(env, atoms.error, bin);
}

NIF_DECL(device_memory_stats) {
    nif_call c = NIF_CALL(env, "device_memory_stats");
    int device;
    if (!nif_get_int(&c, argv[0], "device", &device))
        return c.raised;
    em_memory_stats m;
    em_status st = em_memory_get_device_stats(device, &m);
    if (st != EM_OK)
        return nif_raise_status(&c, st);
    ERL_NIF_TERM keys[4] = {atoms.active, atoms.peak, atoms.cache, atoms.limit};
    ERL_NIF_TERM values[4] = {enif_make_uint64(env, (ErlNifUInt64)m.active),
                              enif_make_uint64(env, (ErlNifUInt64)m.peak),
                              enif_make_uint64(env, (ErlNifUInt64)m.cache),
                              enif_make_uint64(env, (ErlNifUInt64)m.limit)};
    ERL_NIF_TERM map;
    enif_make_map_from_arrays(env, keys, values, 4, &map);
    return map;
}
