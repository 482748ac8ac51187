// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// tc_extras.h: what the TC samplers add to a sample record beyond the
// route, on the sampled path only (sample_info.h).

#ifndef SFLOWSWITCHD_TC_EXTRAS_H
#define SFLOWSWITCHD_TC_EXTRAS_H

static __always_inline void tc_extras(struct __sk_buff *skb, struct sample_meta *m,
				      struct port_config *cfg)
{
}

#endif // SFLOWSWITCHD_TC_EXTRAS_H
