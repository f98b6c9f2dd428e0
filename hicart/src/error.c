// SPDX-License-Identifier: MIT
/* error.c - names and descriptions of hicartError_t. */
#include "hicart.h"

static const struct {
	hicartError_t err;
	const char *name;
	const char *text;
} hicart_errors[] = {
	{ hicartSuccess, "hicartSuccess", "no error" },
	{ hicartErrorInvalidValue, "hicartErrorInvalidValue", "invalid argument" },
	{ hicartErrorMemoryAllocation, "hicartErrorMemoryAllocation", "out of memory" },
	{ hicartErrorInitializationError, "hicartErrorInitializationError",
	  "initialization error (driver and runtime do not match?)" },
	{ hicartErrorInvalidDevicePointer, "hicartErrorInvalidDevicePointer",
	  "invalid device pointer" },
	{ hicartErrorInvalidMemcpyDirection, "hicartErrorInvalidMemcpyDirection",
	  "invalid copy direction for memcpy" },
	{ hicartErrorNoDevice, "hicartErrorNoDevice", "no HiGPU device is detected (is higpu.ko loaded?)" },
	{ hicartErrorInvalidDevice, "hicartErrorInvalidDevice", "invalid device ordinal" },
	{ hicartErrorDevicesUnavailable, "hicartErrorDevicesUnavailable",
	  "peer GPU unavailable (gone from the HiLink fabric, or no guest on it)" },
	{ hicartErrorPeerAccessUnsupported, "hicartErrorPeerAccessUnsupported",
	  "peer access is not supported between these two devices (no HiLink port)" },
	{ hicartErrorPeerAccessAlreadyEnabled, "hicartErrorPeerAccessAlreadyEnabled",
	  "peer access is already enabled" },
	{ hicartErrorPeerAccessNotEnabled, "hicartErrorPeerAccessNotEnabled",
	  "peer access has not been enabled (here, or by the peer for this GPU)" },
	{ hicartErrorOperatingSystem, "hicartErrorOperatingSystem", "OS call failed or operation not supported on this OS" },
	{ hicartErrorInvalidResourceHandle, "hicartErrorInvalidResourceHandle",
	  "invalid resource handle" },
	{ hicartErrorNotReady, "hicartErrorNotReady", "device not ready" },
	{ hicartErrorIllegalAddress, "hicartErrorIllegalAddress",
	  "an illegal memory access was encountered" },
	{ hicartErrorLaunchOutOfResources, "hicartErrorLaunchOutOfResources",
	  "too many resources requested" },
	{ hicartErrorContextIsDestroyed, "hicartErrorContextIsDestroyed",
	  "context is destroyed (the device was reset: restart the process)" },
	{ hicartErrorLaunchFailure, "hicartErrorLaunchFailure", "unspecified launch failure" },
	{ hicartErrorNotSupported, "hicartErrorNotSupported", "operation not supported" },
	{ hicartErrorTimeout, "hicartErrorTimeout", "timeout expired" },
	{ hicartErrorUnknown, "hicartErrorUnknown", "unknown error" },
};

#define HICART_NERR (sizeof(hicart_errors) / sizeof(hicart_errors[0]))

const char *hicartGetErrorString(hicartError_t error)
{
	for (unsigned int i = 0; i < HICART_NERR; i++)
		if (hicart_errors[i].err == error)
			return hicart_errors[i].text;
	return "unrecognized error code";
}

const char *hicartGetErrorName(hicartError_t error)
{
	for (unsigned int i = 0; i < HICART_NERR; i++)
		if (hicart_errors[i].err == error)
			return hicart_errors[i].name;
	return "unrecognized error code";
}
