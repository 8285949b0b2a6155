if Code.ensure_loaded?(Bumblebee) do
  defmodule Emily.Bumblebee.FastKernels do
    @moduledoc """
    Rewrites a Bumblebee model's normalisation, rotary embedding and
    attention layers to `Emily.Fast` kernels.

        %{model: model} = model_info
        model_info = %{model_info | model: Emily.Bumblebee.FastKernels.apply(model)}

    * `:rms_norm` layers (Llama, Qwen, Mistral, ...) become
      `Emily.Fast.rms_norm/3`, with Bumblebee's `:shift` added to the
      weight; `:layer_norm` layers (Axon's, in BERT, ViT, ...) become
      `Emily.Fast.layer_norm/4`. Only layers that normalise the last axis
      are rewritten (all of Bumblebee's do), and only Bumblebee's RMS norm
      and Axon's layer norm (a model's own layer under the same op name,
      such as ModernBERT's bias-free layer norm, stays).
    * Rotary embeddings (`Bumblebee.Layers.rotary_embedding/6`) become
      `Emily.Fast.rope/3`, or `Emily.Fast.rope_with_freqs/4` for the
      `:longrope` and `:llama3` scaling strategies (`:linear` and
      `:dynamic` are a position scale and a base). The frequencies are
      computed when the model is compiled, from the sequence length (a
      shape). The kernel rotates consecutive positions, so each batch row
      takes the offset of its position ids over the tokens its attention
      mask keeps: exact for Bumblebee's default position ids, for the ones
      its text generation derives from a padded mask and for every cached
      decode step; padding tokens themselves get positions that continue
      the row (their results are masked out downstream). Position ids that
      are not consecutive over the kept tokens are not supported.
    * Attention (Bumblebee's `attention_weights_impl` and
      `attention_output_impl` layers) becomes one
      `Emily.Fast.scaled_dot_product_attention/4` (or `_with_mask/5`): the
      key mask, causal limit, sliding window and relative bias merge into
      the additive mask the stock layer builds, or the kernel's causal
      flag where that is the same (no cache offset, as many queries as
      keys, no other mask); the head mask scales each head's output.
      Attention dropout only acts in training (`mode: :train`), where the
      rewritten layer returns the stock layers' result (those layers stay
      in the graph for it, and for the `output_attentions` weights); an
      attention the rewrite does not recognise is left stock.

    ## Options

    `apply/2` and `rewrite/2` take `:only`, the kinds to rewrite among
    `:norms`, `:rotary_embedding` and `:attention` (default: all three).
    All three help: SmolLM2-135M decodes at 116 tokens/s on 2 Zen 5 cores
    with all three against 104–108 with the norms only (2026-12-02, after
    the CPU attention kernel's decode fix), and Bumblebee's
    Qwen3-0.6B-shaped model at 216 tokens/s on an H200 (its stock graph
    ran at 82 the session before, on the older kernels). `:only` is there to compare them, or to leave a kind to
    Bumblebee's own layers.

    Layer names and parameters are unchanged, so the model's state loads
    as before. Results agree with the stock graph to float rounding
    (`test/emily/bumblebee/fast_kernels_test.exs`). On a backend other
    than Emily the kernels run their composed fallbacks.

    ## Summary

    `rewrite/1` returns the model and a summary, a map of counts:
    `:rms_norm`, `:layer_norm`, `:rotary_embedding` and `:attention`
    (layers rewritten) and `:attention_skipped` (attention layers left
    stock). `apply/1` returns the model alone and emits the summary as the
    telemetry event `[:emily, :bumblebee, :fast_kernels]` (the counts are
    its measurements; its metadata is empty).
    """

    @compile {:no_warn_undefined, [Axon]}

    alias Emily.Bumblebee.FastKernels.{Attention, Rotary}

    @doc """
    The model with its norms, rotary embeddings and attention on
    `Emily.Fast` kernels; emits `[:emily, :bumblebee, :fast_kernels]`
    with the counts of `rewrite/1`.
    """
    def apply(%Axon{} = model, opts \\ []) do
      {model, summary} = rewrite(model, opts)
      :telemetry.execute([:emily, :bumblebee, :fast_kernels], summary, %{})
      model
    end

    @doc """
    `{model, summary}`: the rewritten model and how many layers of each
    kind were rewritten (see the module documentation).
    """
    def rewrite(%Axon{nodes: nodes} = model, opts \\ []) do
      only = opts |> Keyword.get(:only, [:norms, :rotary_embedding, :attention]) |> MapSet.new()
      # Only the nodes the output reaches: the ones Axon.rewrite_nodes/2 visits.
      plans =
        Axon.reduce_nodes(model, %{}, fn node, plans ->
          Map.put(plans, node.id, node |> plan(nodes) |> keep_if_asked(only))
        end)

      summary =
        Enum.reduce(
          plans,
          %{rms_norm: 0, layer_norm: 0, rotary_embedding: 0, attention: 0, attention_skipped: 0},
          fn
            {_id, {kind, _rewriter}}, acc -> Map.update!(acc, kind, &(&1 + 1))
            {_id, :attention_skipped}, acc -> Map.update!(acc, :attention_skipped, &(&1 + 1))
            {_id, :skip}, acc -> acc
          end
        )

      rewritten =
        Axon.rewrite_nodes(model, fn %{id: id, policy: policy} ->
          case plans[id] do
            {_kind, rewriter} ->
              fn inputs, stock -> keep_policy(rewriter.(inputs, stock), policy) end

            _ ->
              :skip
          end
        end)

      {rewritten, summary}
    end

    # The new layer computes in the stock layer's precision: a model loaded
    # with `type: :bf16` has bf16 policies, which Axon.layer/3 does not
    # inherit (it would compute the kernel in f32, with casts around it).
    defp keep_policy(%Axon{output: id, nodes: nodes} = layer, policy),
      do: %{layer | nodes: Map.update!(nodes, id, &%{&1 | policy: policy})}

    defp keep_if_asked({kind, _rewriter} = plan, only) do
      group = if kind in [:rms_norm, :layer_norm], do: :norms, else: kind
      if MapSet.member?(only, group), do: plan, else: :skip
    end

    defp keep_if_asked(:attention_skipped, only),
      do: if(MapSet.member?(only, :attention), do: :attention_skipped, else: :skip)

    defp keep_if_asked(:skip, _only), do: :skip

    # {kind, rewriter} for a node to rewrite, :attention_skipped for a stock
    # attention that stays, :skip for anything else.
    # Norms: Bumblebee's RMS norm (one "weight") and Axon's layer norm
    # ("gamma", "beta") only; a model's own layer under the same op name
    # (ModernBERT's bias-free layer norm) stays.
    defp plan(%{op_name: :rms_norm, op: op, opts: opts, name: name_fn} = node, _nodes) do
      if Keyword.get(opts, :channel_index, -1) == -1 and param_names(node) == ["weight"] and
           is_function(op) and Function.info(op, :module) == {:module, Bumblebee.Layers},
         do: {:rms_norm, fn [x], _output -> rms_norm(x, name_fn, opts) end},
         else: :skip
    end

    defp plan(%{op_name: :layer_norm, op: :layer_norm, opts: opts, name: name_fn} = node, _nodes) do
      if Keyword.get(opts, :channel_index, -1) == -1 and param_names(node) == ["gamma", "beta"],
        do: {:layer_norm, fn [x], _output -> layer_norm(x, name_fn, opts) end},
        else: :skip
    end

    defp plan(%{op_name: :custom, op: op, opts: opts, name: name_fn} = node, nodes) do
      cond do
        Attention.bumblebee_fun?(op, :apply_rotary_embedding) ->
          rotary_plan(node, name_fn, opts)

        Attention.bumblebee_fun?(op, :attention_output_impl) ->
          case Attention.plan(node, nodes) do
            {:ok, input_ids, attention_opts} ->
              {:attention,
               fn [%Axon{nodes: current} | _], stock ->
                 inputs = Enum.map(input_ids, &%Axon{output: &1, nodes: current})
                 Attention.layer(inputs, stock, name_fn, attention_opts)
               end}

            nil ->
              :attention_skipped
          end

        true ->
          :skip
      end
    end

    defp plan(_node, _nodes), do: :skip

    defp param_names(%{parameters: parameters}), do: Enum.map(parameters, & &1.name)

    defp rotary_plan(%{parent: [_, _, _, _]}, name_fn, opts) do
      if rem(opts[:size] || 1, 2) == 0,
        do:
          {:rotary_embedding,
           fn inputs, _output -> Rotary.layer(inputs, [name: name_fn] ++ opts) end},
        else: :skip
    end

    defp rotary_plan(_node, _name_fn, _opts), do: :skip

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
