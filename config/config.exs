import Config

# Compile-time debug assertions (see the `Emily` moduledoc). Both default to
# false: the checks are then removed from the compiled code.
config :emily,
  debug_bounds_check: false,
  debug_detect_nan_inf: false

# Runtime settings: the queue length of new streams, and how long a process
# waits for a stream's reply (:infinity or milliseconds).
config :emily,
  worker_queue_limit: 8192,
  await_timeout: :infinity

# Tests attach anonymous functions as telemetry handlers, which :telemetry
# reports at :info level each time (a hint about dispatch speed).
if config_env() == :test, do: config(:logger, level: :warning)
