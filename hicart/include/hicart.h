/* SPDX-License-Identifier: MIT */
/*
 * hicart.h - the HiGPU runtime (libhicart), shaped like the CUDA runtime
 * API so that porting is a rename: cuda -> hicart, cudaMemcpyHostToDevice
 * -> hicartMemcpyHostToDevice, and so on. Error codes keep CUDA's values.
 *
 * Model: each process has, per GPU, one device context (an open file of
 * /dev/higpu<gpu_id>), made on first use. The current device is per
 * thread (hicartSetDevice). Streams and events belong to the device that
 * was current when they were made. A child of fork() starts without
 * contexts: what the parent allocated is not the child's.
 *
 * Errors: every call returns a hicartError_t and records a failure as
 * the thread's last error (hicartGetLastError reads and clears it,
 * hicartPeekAtLastError only reads). Asynchronous work (the *Async
 * calls, hicartFill, hicartReduce) reports a failure at the next
 * synchronising call on its stream or device.
 *
 * See hicart(3) and docs/gpu-driver.md.
 */
#ifndef HICART_H
#define HICART_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HICART_VERSION		1000	/* 1.0: major * 1000 + minor * 10 */

typedef enum hicartError {
	hicartSuccess = 0,
	hicartErrorInvalidValue = 1,
	hicartErrorMemoryAllocation = 2,
	hicartErrorInitializationError = 3,
	hicartErrorDevicesUnavailable = 46,	/* a peer GPU is gone */
	hicartErrorInvalidDevicePointer = 17,
	hicartErrorInvalidMemcpyDirection = 21,
	hicartErrorNoDevice = 100,
	hicartErrorInvalidDevice = 101,
	hicartErrorPeerAccessUnsupported = 217,
	hicartErrorOperatingSystem = 304,
	hicartErrorInvalidResourceHandle = 400,
	hicartErrorNotReady = 600,
	hicartErrorIllegalAddress = 700,
	hicartErrorLaunchOutOfResources = 701,
	hicartErrorPeerAccessAlreadyEnabled = 704,
	hicartErrorPeerAccessNotEnabled = 705,
	hicartErrorContextIsDestroyed = 709,
	hicartErrorLaunchFailure = 719,
	hicartErrorNotSupported = 801,
	hicartErrorTimeout = 909,
	hicartErrorUnknown = 999
} hicartError_t;

typedef enum hicartMemcpyKind {
	hicartMemcpyHostToHost = 0,
	hicartMemcpyHostToDevice = 1,
	hicartMemcpyDeviceToHost = 2,
	hicartMemcpyDeviceToDevice = 3,
	hicartMemcpyDefault = 4	/* from the pointers (this process's allocations) */
} hicartMemcpyKind;

/* Element types of the built-in kernels (values as the device ABI's). */
typedef enum hicartDataType {
	hicartFloat32 = 1,
	hicartFloat16 = 2,
	hicartBfloat16 = 3,
	hicartInt32 = 4,
	hicartInt64 = 5
} hicartDataType;

typedef enum hicartReduceOp {
	hicartReduceSum = 1,
	hicartReduceMin = 2,
	hicartReduceMax = 3
} hicartReduceOp;

typedef struct hicartStream *hicartStream_t;	/* NULL: the default stream */
typedef struct hicartEvent *hicartEvent_t;

#define hicartStreamDefault	0x0
#define hicartStreamNonBlocking	0x1	/* accepted; every stream is */
#define hicartEventDefault	0x0
#define hicartEventDisableTiming 0x2	/* accepted; timing costs nothing */

typedef struct hicartDeviceProp {
	char name[256];
	size_t totalGlobalMem;		/* bytes of device memory */
	size_t memBudget;		/* of them, what this guest may hold */
	int gpuId;			/* the N of /dev/higpuN */
	int hilinkPorts;		/* peer-fabric ports (0: none) */
	int major;			/* device ABI version */
	int minor;
	int maxStreams;			/* per context, with the default one */
	int maxEvents;
	int asyncEngineCount;		/* streams run concurrently */
	unsigned int caps;		/* device capability bits */
	size_t memAlign;		/* least alignment of an allocation */
	char devicePath[32];
} hicartDeviceProp;

/* hicartGetDeviceStats: the device now (what hicart-smi shows). */
typedef struct hicartDeviceStats {
	uint64_t memTotal;
	uint64_t memUsed;
	uint64_t memFreeLargest;
	uint64_t busyNs;		/* engine time, all streams together */
	uint64_t clockNs;		/* device clock */
	uint64_t commands;
	uint64_t kernels;
	uint64_t bytesH2D;
	uint64_t bytesD2H;
	uint64_t bytesD2D;
	unsigned int contexts;
	unsigned int allocs;
	unsigned int inflight;
	unsigned int resetCount;
	uint64_t ctxErrors;		/* of this process's context */
} hicartDeviceStats;

typedef struct hicartProcessInfo {
	int pid;
	unsigned int ctxId;
	uint64_t memUsed;
	unsigned int allocs;
	unsigned int inflight;
	char name[16];
} hicartProcessInfo;

/* Devices */
hicartError_t hicartGetDeviceCount(int *count);
hicartError_t hicartSetDevice(int device);
hicartError_t hicartGetDevice(int *device);
hicartError_t hicartGetDeviceProperties(hicartDeviceProp *prop, int device);
hicartError_t hicartDeviceSynchronize(void);
hicartError_t hicartMemGetInfo(size_t *free, size_t *total);
hicartError_t hicartDriverGetVersion(int *version);
hicartError_t hicartRuntimeGetVersion(int *version);
hicartError_t hicartGetDeviceStats(int device, hicartDeviceStats *stats);
/* *count: room in procs; on return the contexts written (not this process's). */
hicartError_t hicartGetDeviceProcesses(int device, hicartProcessInfo *procs, unsigned int *count);

/* Memory */
hicartError_t hicartMalloc(void **devPtr, size_t size);
hicartError_t hicartFree(void *devPtr);
hicartError_t hicartMallocHost(void **ptr, size_t size);
hicartError_t hicartFreeHost(void *ptr);
hicartError_t hicartMemcpy(void *dst, const void *src, size_t count, hicartMemcpyKind kind);
hicartError_t hicartMemcpyAsync(void *dst, const void *src, size_t count,
				hicartMemcpyKind kind, hicartStream_t stream);
hicartError_t hicartMemset(void *devPtr, int value, size_t count);
hicartError_t hicartMemsetAsync(void *devPtr, int value, size_t count, hicartStream_t stream);

/*
 * Peer access over HiLink (the rack's GPU fabric). A peer is another
 * device of this process (0 .. count-1), or a GPU of another guest on
 * the same HiLink switch, named hicartRemoteDevice(gpu_id). Device
 * pointers name their GPU, so a pointer a peer process allocated (and
 * sent over, say, a socket) is used as it is. Access needs both ends,
 * as cudaDeviceEnablePeerAccess in each direction of a pair: the current
 * device enables the peer, and a process on the peer enables this GPU.
 * hicartMemcpyPeer runs on a device of this process: the source's when
 * it is local (a remote write), else the destination's (a remote read);
 * between two local devices on the source (or the stream's device).
 * Errors of peer copies: hicartErrorPeerAccessNotEnabled,
 * hicartErrorIllegalAddress (a range outside an allocation, here or on
 * the peer), hicartErrorDevicesUnavailable (the peer is gone).
 */
#define hicartRemoteDevice(gpuId)	(0x10000 | (gpuId))
#define hicartIsRemoteDevice(dev)	(((dev) & ~0xff) == 0x10000)

hicartError_t hicartDeviceCanAccessPeer(int *canAccessPeer, int device, int peerDevice);
hicartError_t hicartDeviceEnablePeerAccess(int peerDevice, unsigned int flags);
hicartError_t hicartDeviceDisablePeerAccess(int peerDevice);
hicartError_t hicartMemcpyPeer(void *dst, int dstDevice, const void *src, int srcDevice, size_t count);
hicartError_t hicartMemcpyPeerAsync(void *dst, int dstDevice, const void *src, int srcDevice,
				    size_t count, hicartStream_t stream);

/* Streams */
hicartError_t hicartStreamCreate(hicartStream_t *stream);
hicartError_t hicartStreamCreateWithFlags(hicartStream_t *stream, unsigned int flags);
hicartError_t hicartStreamSynchronize(hicartStream_t stream);
hicartError_t hicartStreamQuery(hicartStream_t stream);
hicartError_t hicartStreamWaitEvent(hicartStream_t stream, hicartEvent_t event, unsigned int flags);
hicartError_t hicartStreamDestroy(hicartStream_t stream);

/* Events */
hicartError_t hicartEventCreate(hicartEvent_t *event);
hicartError_t hicartEventCreateWithFlags(hicartEvent_t *event, unsigned int flags);
hicartError_t hicartEventRecord(hicartEvent_t event, hicartStream_t stream);
hicartError_t hicartEventQuery(hicartEvent_t event);
hicartError_t hicartEventSynchronize(hicartEvent_t event);
hicartError_t hicartEventElapsedTime(float *ms, hicartEvent_t start, hicartEvent_t end);
hicartError_t hicartEventDestroy(hicartEvent_t event);

/*
 * Built-in kernels, queued on stream like a kernel launch.
 * hicartFill: dst[i] = *value (one element of dtype), i < count.
 * hicartReduce: dst[i] = src0[i] op src1[i]; dst may be src0 or src1.
 * Float semantics: hicart(3) (f16/bf16 go through binary32, NaN results
 * are the type's default quiet NaN).
 */
hicartError_t hicartFill(void *dst, const void *value, size_t count, hicartDataType dtype,
			 hicartStream_t stream);
hicartError_t hicartReduce(void *dst, const void *src0, const void *src1, size_t count,
			   hicartDataType dtype, hicartReduceOp op, hicartStream_t stream);
size_t hicartDataTypeSize(hicartDataType dtype);	/* 0 if unknown */

/* Errors */
hicartError_t hicartGetLastError(void);
hicartError_t hicartPeekAtLastError(void);
const char *hicartGetErrorString(hicartError_t error);
const char *hicartGetErrorName(hicartError_t error);

/* binary16 and bfloat16 (round to nearest even; NaN -> default quiet NaN) */
uint16_t hicartFloatToHalf(float f);
float hicartHalfToFloat(uint16_t h);
uint16_t hicartFloatToBfloat16(float f);
float hicartBfloat16ToFloat(uint16_t b);

#ifdef __cplusplus
}
#endif

#endif /* HICART_H */
