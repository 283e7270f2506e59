// Device fills with the values of randgen.h (element i of the buffer gets value i of the stream).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace epxbench {

void fillBf16(uint16_t* p, size_t n, uint64_t key, cudaStream_t s);
void fillFp8(uint8_t* p, size_t n, uint64_t key, cudaStream_t s);
void fillScales(float* p, size_t n, uint64_t key, cudaStream_t s);
// Engram tables (engram_work.h): word i of the buffer gets engramWord(key, first + i).
void fillEngramWords(uint32_t* p, size_t n, uint64_t key, uint64_t first, cudaStream_t s);

}  // namespace epxbench
