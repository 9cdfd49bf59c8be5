"""Stand-ins for SGLang's host KV pools (``sglang.srt.mem_cache.pool_host``),
written for the tierkv tests from SGLang's documented layouts: real torch CPU
tensors of the same shapes, the page tables (``get_page_buffer_meta``) with
the same pointer counts, order and sizes, and the flat-page copy helpers.
Host indices are token indices; a page is ``page_size`` consecutive tokens.

MHA buffer shapes (K and V stacked first):
    layer_first        (2, layers, tokens, heads, dim)       2 x layers regions per page
    page_first         (2, tokens, layers, heads, dim)       K, V per page
    page_first_direct  (2, pages, layers, page, heads, dim)  K, V per page
    page_head          (2, pages, heads, page, layers, dim)  K, V per page
MLA buffer shapes:
    layer_first        (layers, tokens, 1, dim)              layers regions per page
    page_first         (tokens, layers, 1, dim)              one region per page
    page_first_direct  (pages, layers, page, 1, dim)         one region per page
"""

from __future__ import annotations

import torch

MHA_LAYOUTS = ("layer_first", "page_first", "page_first_direct", "page_head")
MLA_LAYOUTS = ("layer_first", "page_first", "page_first_direct")


class HostKVCache:
    def __init__(self, size: int, page_size: int, layout: str, layers: int,
                 dtype: torch.dtype):
        assert size % page_size == 0
        self.size, self.page_size, self.layout = size, page_size, layout
        self.page_num = size // page_size
        self.layer_num, self.dtype = layers, dtype
        self.itemsize = torch.empty(0, dtype=dtype).element_size()  # dtype.itemsize in torch 2
        self.kv_buffer = torch.zeros(self.dims(), dtype=dtype)

    def _pages(self, indices):
        indices = indices.tolist()
        assert len(indices) % self.page_size == 0
        return indices[:: self.page_size]

    def get_dummy_flat_data_page(self) -> torch.Tensor:
        return torch.zeros(self.page_elems(), dtype=self.dtype)

    def flat_page(self, index: int) -> torch.Tensor:
        """Test helper: the page at token `index` as bytes, in flat page order."""
        return self.get_data_page(index, flat=True).contiguous().view(torch.uint8)


class MHATokenToKVPoolHost(HostKVCache):
    def __init__(self, size, page_size, layout, layers=4, heads=2, head_dim=32,
                 dtype=torch.bfloat16):
        if layout not in MHA_LAYOUTS:
            raise ValueError(f"Unsupported layout: {layout}")
        self.head_num, self.head_dim = heads, head_dim
        super().__init__(size, page_size, layout, layers, dtype)

    def dims(self):
        L, H, D, ps = self.layer_num, self.head_num, self.head_dim, self.page_size
        return {"layer_first": (2, L, self.size, H, D),
                "page_first": (2, self.size, L, H, D),
                "page_first_direct": (2, self.page_num, L, ps, H, D),
                "page_head": (2, self.page_num, H, ps, L, D)}[self.layout]

    def page_elems(self):
        return 2 * self.layer_num * self.page_size * self.head_num * self.head_dim

    def get_page_buffer_meta(self, indices):
        it = self.itemsize
        base, L, H, D = self.kv_buffer.data_ptr(), self.layer_num, self.head_num, self.head_dim
        v_offset = L * self.size * H * D * it
        ptrs = []
        if self.layout == "layer_first":
            for idx in self._pages(indices):
                for layer in range(L):
                    k = base + idx * H * D * it + layer * self.size * H * D * it
                    ptrs += [k, k + v_offset]
            return ptrs, [it * self.page_size * H * D] * len(ptrs)
        for idx in self._pages(indices):
            k = base + idx * L * H * D * it
            ptrs += [k, k + v_offset]
        return ptrs, [L * it * self.page_size * H * D] * len(ptrs)

    def get_split_heads_page_buffer_meta(self, indices, split_factor):
        assert self.layout == "page_head" and self.head_num % split_factor == 0
        it = self.itemsize
        base, L, H, D = self.kv_buffer.data_ptr(), self.layer_num, self.head_num, self.head_dim
        v_offset = L * self.size * H * D * it
        ptrs = []
        for idx in self._pages(indices):
            for head in range(0, H, H // split_factor):
                k = base + idx * L * H * D * it + head * self.page_size * L * D * it
                ptrs += [k, k + v_offset]
        return ptrs, [L * it * self.page_size * H * D // split_factor] * len(ptrs)

    def get_data_page(self, index, flat=True):
        ps = self.page_size
        if self.layout == "layer_first":
            page = self.kv_buffer[:, :, index:index + ps]
        elif self.layout == "page_first":
            page = self.kv_buffer[:, index:index + ps]
        else:
            page = self.kv_buffer[:, index // ps:index // ps + 1]
        return page.flatten() if flat else page

    def set_from_flat_data_page(self, index, data_page):
        ps, L, H, D = self.page_size, self.layer_num, self.head_num, self.head_dim
        if self.layout == "layer_first":
            self.kv_buffer[:, :, index:index + ps] = data_page.reshape(2, L, ps, H, D)
        elif self.layout == "page_first":
            self.kv_buffer[:, index:index + ps] = data_page.reshape(2, ps, L, H, D)
        elif self.layout == "page_first_direct":
            self.kv_buffer[:, index // ps:index // ps + 1] = data_page.reshape(2, 1, L, ps, H, D)
        else:
            self.kv_buffer[:, index // ps:index // ps + 1] = data_page.reshape(2, 1, H, ps, L, D)


class MLATokenToKVPoolHost(HostKVCache):
    def __init__(self, size, page_size, layout, layers=4, kv_dim=96, dtype=torch.bfloat16):
        if layout not in MLA_LAYOUTS:
            raise ValueError(f"Unsupported layout: {layout}")
        self.kv_cache_dim = kv_dim
        super().__init__(size, page_size, layout, layers, dtype)

    def dims(self):
        L, K, ps = self.layer_num, self.kv_cache_dim, self.page_size
        return {"layer_first": (L, self.size, 1, K),
                "page_first": (self.size, L, 1, K),
                "page_first_direct": (self.page_num, L, ps, 1, K)}[self.layout]

    def page_elems(self):
        return self.layer_num * self.page_size * self.kv_cache_dim

    def get_page_buffer_meta(self, indices):
        it, base, L, K = self.itemsize, self.kv_buffer.data_ptr(), self.layer_num, \
            self.kv_cache_dim
        ptrs = []
        if self.layout == "layer_first":
            for idx in self._pages(indices):
                ptrs += [base + idx * K * it + layer * self.size * K * it for layer in range(L)]
            return ptrs, [self.page_size * K * it] * len(ptrs)
        ptrs = [base + idx * L * K * it for idx in self._pages(indices)]
        return ptrs, [L * self.page_size * K * it] * len(ptrs)

    def get_data_page(self, index, flat=True):
        ps = self.page_size
        if self.layout == "layer_first":
            page = self.kv_buffer[:, index:index + ps]
        elif self.layout == "page_first":
            page = self.kv_buffer[index:index + ps]
        else:
            page = self.kv_buffer[index // ps:index // ps + 1]
        return page.flatten() if flat else page

    def set_from_flat_data_page(self, index, data_page):
        ps, L, K = self.page_size, self.layer_num, self.kv_cache_dim
        if self.layout == "layer_first":
            self.kv_buffer[:, index:index + ps] = data_page.reshape(L, ps, 1, K)
        elif self.layout == "page_first":
            self.kv_buffer[index:index + ps] = data_page.reshape(ps, L, 1, K)
        else:
            self.kv_buffer[index // ps:index // ps + 1] = data_page.reshape(1, L, ps, 1, K)


class MambaPoolHost:
    """A hybrid model's state pool: per slot one temporal state and one state
    per conv buffer; one slot per page (page_size 1)."""

    page_size = 1
    layout = "page_first"

    def __init__(self, slots, temporal_bytes=512, conv_bytes=(256, 128), dtype=torch.uint8):
        self.dtype = dtype
        self.temporal_buffer = torch.zeros((slots, temporal_bytes), dtype=dtype)
        self.conv_buffer = [torch.zeros((slots, n), dtype=dtype) for n in conv_bytes]
        self.kv_buffer = self.temporal_buffer

    def get_page_buffer_meta(self, indices):
        ptrs, sizes = [], []
        for i in indices.tolist():
            for buf in [self.temporal_buffer] + self.conv_buffer:
                ptrs.append(buf[i].data_ptr())
                sizes.append(buf[i].numel() * buf.element_size())
        return ptrs, sizes

    def flat_page(self, index):
        return torch.cat([b[index] for b in [self.temporal_buffer] + self.conv_buffer])

    def set_from_flat_data_page(self, index, data):
        at = 0
        for b in [self.temporal_buffer] + self.conv_buffer:
            b[index].copy_(data[at:at + b.shape[1]].view(b.dtype))
            at += b.shape[1]

    def page_elems(self):
        return sum(b.shape[1] for b in [self.temporal_buffer] + self.conv_buffer)
