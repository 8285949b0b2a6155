if Code.ensure_loaded?(Bumblebee) do
  defmodule Emily.Bumblebee.FastKernels do
    @moduledoc """
    Rewrites a Bumblebee model's normalisation layers to `Emily.Fast`
    kernels: one pass over each row instead of the composed mean, variance
    and scaling.

        %{model: model} = model_info
        model_info = %{model_info | model: Emily.Bumblebee.FastKernels.apply(model)}

    * `:rms_norm` layers (Llama, Qwen, Mistral, ...) become
      `Emily.Fast.rms_norm/3`, with Bumblebee's `:shift` added to the weight;
    * `:layer_norm` layers (BERT, ViT, ...) become `Emily.Fast.layer_norm/4`.

    Only layers that normalise the last axis are rewritten (all of
    Bumblebee's do). Layer names and parameters are unchanged, so the
    model's state loads as before. The kernels accumulate in f32 as
    Bumblebee's layers do; results agree with the stock graph to float
    rounding (`test/emily/bumblebee/fast_kernels_test.exs`). On a backend
    other than Emily the kernels run their composed fallback.

    Rotary embeddings and attention are not rewritten yet: Bumblebee builds
    them inside its attention layers, whose masks (key, head, window,
    causal) the fused attention would have to take over.
    """

    @compile {:no_warn_undefined, [Axon]}

    @doc "The model with its normalisation layers on `Emily.Fast` kernels."
    def apply(%Axon{} = model) do
      Axon.rewrite_nodes(model, fn
        %{op_name: :rms_norm, opts: opts, name: name_fn} ->
          if Keyword.get(opts, :channel_index, -1) == -1,
            do: fn [x], _output -> rms_norm(x, name_fn, opts) end,
            else: :skip

        %{op_name: :layer_norm, opts: opts, name: name_fn} ->
          if Keyword.get(opts, :channel_index, -1) == -1,
            do: fn [x], _output -> layer_norm(x, name_fn, opts) end,
            else: :skip

        _ ->
          :skip
      end)
    end

    defp rms_norm(x, name_fn, opts) do
      weight =
        Axon.param("weight", fn shape -> {elem(shape, tuple_size(shape) - 1)} end,
          initializer: :ones
        )

      Axon.layer(&__MODULE__.rms_norm_impl/3, [x, weight],
        name: name_fn,
        op_name: :rms_norm,
        shift: Keyword.get(opts, :shift, 0.0),
        epsilon: Keyword.get(opts, :epsilon, 1.0e-6)
      )
    end

    defp layer_norm(x, name_fn, opts) do
      gamma = Axon.param("gamma", [{:axis, -1}], initializer: :ones)
      beta = Axon.param("beta", [{:axis, -1}], initializer: :zeros)

      Axon.layer(&__MODULE__.layer_norm_impl/4, [x, gamma, beta],
        name: name_fn,
        op_name: :layer_norm,
        epsilon: Keyword.get(opts, :epsilon, 1.0e-5),
        channel_index: -1
      )
    end

    @doc false
    def rms_norm_impl(x, weight, opts) do
      weight = if opts[:shift] == 0.0, do: weight, else: Nx.add(weight, opts[:shift])
      Emily.Fast.rms_norm(x, weight, eps: opts[:epsilon])
    end

    @doc false
    def layer_norm_impl(x, gamma, beta, opts),
      do: Emily.Fast.layer_norm(x, gamma, beta, eps: opts[:epsilon])
  end
end
