/* The machine the fake driver libraries (fake_nvml.c, fake_cudart.c)
 * describe: the GPUs and NVSwitches of fixtures/dgx_h100.xml. Its eight
 * H100s (compute capability 9.0) each have 18 NVLink lanes to four
 * NVSwitches, 5+4+4+5, as in an HGX H100 board. */
#ifndef GYRE_TESTS_TOPOLOGY_FAKE_DGX_H
#define GYRE_TESTS_TOPOLOGY_FAKE_DGX_H

enum { kFakeGpus = 8, kFakeSwitches = 4, kFakeLinks = 18 };

/* PCI bus numbers (domain 0, device 0, function 0), in bus order. */
static const unsigned kFakeGpuBus[kFakeGpus] = {0x18, 0x19, 0x38, 0x39, 0x98, 0x99, 0xb8, 0xb9};
static const unsigned kFakeSwitchBus[kFakeSwitches] = {0x05, 0x06, 0x07, 0x08};

/* The NVSwitch at the far end of each lane: round robin, as lanes are wired
 * on the board (not in runs), then the two extra lanes of the outer
 * switches; 5, 4, 4 and 5 lanes in all. */
static const int kFakeLinkSwitch[kFakeLinks] = {0, 1, 2, 3, 0, 1, 2, 3, 0,
                                                1, 2, 3, 0, 1, 2, 3, 0, 3};

#endif
