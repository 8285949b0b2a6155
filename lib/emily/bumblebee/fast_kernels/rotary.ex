if Code.ensure_loaded?(Bumblebee) do
  defmodule Emily.Bumblebee.FastKernels.Rotary do
    @moduledoc false
    # Bumblebee's `apply_rotary_embedding/5` layer (query and key rotated
    # by a cos/sin table gathered at `position_ids`) on `Emily.Fast.rope`
    # / `rope_with_freqs`. The kernel rotates positions `offset + 0 ..
    # seq - 1`, so each batch row gets the offset of its own positions:
    #
    #   * one token (a cached decode step): its position id, exact;
    #   * otherwise the position ids are taken to be consecutive over the
    #     tokens that the attention mask keeps (its first `seq` entries)
    #     - true of Bumblebee's default position ids and of those its text
    #     generation derives from the mask (left or right padding). Padding
    #     tokens then continue the sequence instead of repeating a
    #     position; every later layer masks them out.
    #
    # The frequency schedule (default, :linear, :dynamic, :longrope,
    # :llama3) is Bumblebee's `create_sinusoidal_positions/5`, evaluated
    # when the layer is traced (its only runtime dependency, the sequence
    # length, is a shape) and handed to the kernel as MLX-style periods.

    @doc false
    # The replacement layer: the same inputs and options, a {query, key} tuple.
    def layer(inputs, opts) do
      Axon.layer(&__MODULE__.rotary_impl/5, inputs,
        name: opts[:name],
        op_name: :rotary_embedding,
        size: opts[:size],
        scaling_strategy: opts[:scaling_strategy],
        max_positions: opts[:max_positions],
        base: opts[:base]
      )
    end

    @doc false
    def rotary_impl(query, key, position_ids, attention_mask, opts) do
      size = opts[:size]
      {_batch, seq, _heads, head_dim} = Nx.shape(query)

      if size != head_dim or rem(size, 2) != 0 do
        raise ArgumentError,
              "Emily.Bumblebee.FastKernels: rotary size #{size} must be the (even) head size " <>
                "#{head_dim}"
      end

      table_length =
        case attention_mask do
          %Axon.None{} -> Nx.axis_size(position_ids, 1)
          mask -> Nx.axis_size(mask, 1)
        end

      schedule = schedule(table_length, opts)
      offsets = row_offsets(position_ids, attention_mask, seq)
      {rotate(query, offsets, schedule), rotate(key, offsets, schedule)}
    end

    # {batch, seq, heads, dim}: each row rotated at its own offset.
    defp rotate(x, offsets, schedule) do
      batch = Nx.axis_size(x, 0)

      rows =
        for row <- 0..(batch - 1) do
          offset = offsets |> Nx.slice_along_axis(row, 1, axis: 0) |> Nx.reshape({})

          x
          |> Nx.slice_along_axis(row, 1, axis: 0)
          |> swap_seq_and_heads()
          |> rope(offset, schedule)
          |> swap_seq_and_heads()
        end

      if batch == 1, do: hd(rows), else: Nx.concatenate(rows, axis: 0)
    end

    # {b, seq, heads, dim} <-> {b, heads, seq, dim}, the kernel's layout;
    # moving an axis of size 1 (one token: a decode step) is a reshape.
    defp swap_seq_and_heads(x) do
      {b, n, m, d} = Nx.shape(x)

      if n == 1 or m == 1,
        do: Nx.reshape(x, {b, m, n, d}),
        else: Nx.transpose(x, axes: [0, 2, 1, 3])
    end

    defp rope(x, offset, {:base, base, scale, magnitude}) do
      dims = Nx.axis_size(x, -1)
      x |> Emily.Fast.rope(offset, dims: dims, base: base, scale: scale) |> magnify(magnitude)
    end

    defp rope(x, offset, {:freqs, freqs, magnitude}) do
      dims = Nx.axis_size(x, -1)
      freqs = constant(freqs, x)
      x |> Emily.Fast.rope_with_freqs(offset, freqs, dims: dims) |> magnify(magnitude)
    end

    defp magnify(x, 1.0), do: x
    defp magnify(x, m), do: Nx.multiply(x, m)

    # The position of each row's first token (s64, {batch}).
    defp row_offsets(position_ids, attention_mask, seq) do
      position_ids = Nx.as_type(position_ids, :s64)

      case attention_mask do
        _ when seq == 1 ->
          first_positions(position_ids)

        %Axon.None{} ->
          first_positions(position_ids)

        mask ->
          # Over the kept tokens, position - index is the offset; a row with
          # no kept token falls back to its first position.
          kept = mask |> Nx.slice_along_axis(0, seq, axis: 1) |> Nx.not_equal(0)
          shifted = Nx.subtract(position_ids, Nx.iota({1, seq}, type: :s64))
          lowest = Nx.Constants.min_finite(:s64)
          best = kept |> Nx.select(shifted, lowest) |> Nx.reduce_max(axes: [1])
          Nx.select(Nx.equal(best, lowest), first_positions(position_ids), best)
      end
    end

    defp first_positions(position_ids),
      do: position_ids |> Nx.slice_along_axis(0, 1, axis: 1) |> Nx.reshape({:auto})

    # ---- the frequency schedule (Bumblebee's create_sinusoidal_positions) ----

    defp schedule(length, opts) do
      size = opts[:size]
      base = opts[:base]
      max_positions = opts[:max_positions]

      case opts[:scaling_strategy] do
        %{type: :linear, factor: factor} ->
          {:base, base * 1.0, 1.0 / factor, 1.0}

        %{type: :dynamic, factor: factor} when length > max_positions ->
          base = base * (factor * length / max_positions - (factor - 1))
          {:base, :math.pow(base, size / (size - 2)), 1.0, 1.0}

        %{
          type: :longrope,
          short_factor: short,
          long_factor: long,
          original_max_positions: original
        } ->
          factor = if length > original, do: long, else: short
          periods = Enum.zip_with(periods(base, size), factor, &(&1 * &2))
          scale = max_positions / original

          magnitude =
            if scale <= 1.0,
              do: 1.0,
              else: :math.sqrt(1 + :math.log(scale) / :math.log(original))

          {:freqs, tensor(periods), magnitude}

        %{type: :llama3} = strategy ->
          {:freqs, tensor(llama3_periods(periods(base, size), strategy)), 1.0}

        _default ->
          {:base, base * 1.0, 1.0, 1.0}
      end
    end

    # base ** (2i / size): the period of pair i (1 / Bumblebee's inv_frequency).
    defp periods(base, size),
      do: for(i <- 0..(div(size, 2) - 1), do: :math.pow(base, 2 * i / size))

    # Llama 3: long wavelengths slowed by `factor`, short ones kept, the band
    # between interpolated (as Bumblebee's llama3_inv_frequency).
    defp llama3_periods(periods, %{
           factor: factor,
           low_frequency_factor: low,
           high_frequency_factor: high,
           original_max_positions: original
         }) do
      low_wavelength = original / low
      high_wavelength = original / high

      Enum.map(periods, fn period ->
        inv = 1.0 / period
        wavelength = 2 * :math.pi() / inv

        cond do
          wavelength < high_wavelength ->
            period

          wavelength > low_wavelength ->
            period * factor

          true ->
            smooth = (original / wavelength - low) / (high - low)
            1.0 / ((1 - smooth) * inv / factor + smooth * inv)
        end
      end)
    end

    # Inside defn a tensor computed at trace time becomes a constant of the
    # expression (a block's arguments are tensors of one kind).
    defp constant(t, %Nx.Tensor{data: %Nx.Defn.Expr{}}), do: Nx.Defn.Expr.tensor(t)
    defp constant(t, _x), do: t

    defp tensor(list), do: Nx.tensor(list, type: :f32, backend: Nx.BinaryBackend)
  end
end
