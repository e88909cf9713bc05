r"""Anonymisation (Schneider et al. 2024b, Sec. 3, Alg. 1): from a raw video to an avatar-anonymised
video and the public mask that MaskDP trains with.

    python -m maskdp_jax.anonymize --src VIDEO_DIR --dst OUT_DIR --mask_dir MASK_DIR [--config=...]

writes every video of ``VIDEO_DIR`` (same relative paths and stems, ``.mkv``: lossless FFV1 in
Matroska) anonymised to ``OUT_DIR``, its mask to
``MASK_DIR/<same path stem>.npz`` (uint8 ``[T, H, W]``, 1 = public) and ``OUT_DIR/summary.json``:
exactly the layout ``train.py`` reads (``input.data_dir=OUT_DIR``, ``input.mask_dir=MASK_DIR``).

Stages (:mod:`maskdp_jax.anonymize.stages` holds their interfaces; each runs offline on a CPU, and
the paper's neural stages plug in behind the same interface):

1. ``f_seg`` person segmentation -> ``q`` (:mod:`maskdp_jax.anonymize.segment`; the default finds
   faces with CenterFace and people with MoveNet MultiPose (one instance each, groups too) and
   segments each person with BlazePose, models copied from pip packages:
   :mod:`maskdp_jax.anonymize.centerface`, :mod:`maskdp_jax.anonymize.movenet`,
   :mod:`maskdp_jax.anonymize.pose`; OpenCV's HOG people detector as an option,
   :mod:`maskdp_jax.anonymize.bodies`);
2. ``B`` mask cleanup: temporal unflickering, optional growth (none by default), Gaussian alpha
   edges (:mod:`maskdp_jax.anonymize.cleanup`);
3. ``f_inp`` inpainting of the person -> ``x_dot`` (:mod:`maskdp_jax.anonymize.inpaint`);
4. ``f_pos`` body poses (:mod:`maskdp_jax.anonymize.pose`: found with the mask, or from files) and
   ``f_ren`` a procedural avatar clipped to the person's mask, posed where there is a pose ->
   ``h``, its region ``r`` (:mod:`maskdp_jax.anonymize.avatar`);
5. ``Merge``, tubelet crops ``C``, refinement ``G`` (an interface; no-op by default) and
   composition ``K`` (:mod:`maskdp_jax.anonymize.compose`).

What the guarantee covers (read this before using the masks)
------------------------------------------------------------
MaskDP protects the *private* pixels (mask 0) of a video under masked adjacency: neighbouring
datasets differ in the private pixels of one video and share everything else, **the masks
included**. Consequences for a pipeline that makes the masks:

* **A public pixel must be a function of public information only.** Here the public mask is the
  avatar's own region ``r``, eroded by the radius of the compositing blur (where the avatar is
  blended with the background the pixel mixes both) and, when the output is stored lossily, by a
  codec margin. Inpainted pixels are computed from the private background and blended edges mix
  it in: both are *private*. The avatar is rendered from the cleaned person mask (with the
  tracks linking its blobs, which pick each person's palette) and public constants (palette,
  seed) only: no pixel of the person or of the background reaches it. So, *with the
  segmentation held fixed*, changing any pixel of the source video leaves every public pixel of
  the output bit-identical (tested on lossless output). A refiner ``G`` that reads the
  crop's background (the paper's diffusion model is conditioned on crops with background) makes
  its pasted pixels private; one that reads only the avatar keeps them public
  (:class:`maskdp_jax.anonymize.stages.Refiner`). A lossy codec (``store="h264"``) breaks
  bit-identity: motion compensation and rate control let any pixel influence any other; the codec
  margin only keeps the public region away from block-level mixing and is **not** a guarantee, so
  lossless FFV1 is the default.
* **The mask is public, yet a segmenter reads pixels.** The released mask carries information about
  every pixel the segmenter read, and so do the avatar's pixels: its outline, bands and shading are
  drawn from the cleaned person mask ``q`` (and its limbs from the poses, which are declared with
  their own ``reads`` and held to ``max_reads`` too), of which the released mask is only the eroded
  core (the summary's ``person_fraction`` and ``frames_without_person`` are functions of ``q`` too).
  None of that is protected by DP. The guarantee is therefore *for private pixels given the
  segmentation ``q`` and the poses*: an adversary learns, outside DP, whatever they reveal. Each
  segmenter declares what it reads (``reads``): ``"none"`` (masks from files: whoever made them
  answers for them; the pipeline hands such a segmenter a blank video, so the declaration holds by
  construction), ``"boxes"`` (GrabCut inside given person boxes: the mask depends only on the pixels
  inside the boxes and a small margin, mostly the person, and on whatever made the boxes), or
  ``"video"`` (background subtraction and detectors read every pixel, background included; e.g. a
  car passing behind the person can enter the mask, and with it the avatar). ``"boxes"`` and
  ``"video"`` are declarations the pipeline trusts. The summary records each video's ``reads``, and
  ``max_reads`` refuses a segmenter that reads more than a user allows.
* **A refiner that reads the background leaves nothing public.** With the paper's diffusion
  refinement (``reads="crop"``) the tubelets cover the whole avatar, every pasted pixel is
  private, and MaskDP on the output is DP-SGD. Only an avatar-only refiner keeps the public region.
* **The outputs are private data.** The anonymised videos keep the real background and any part
  of the person the segmenter missed (both private, protected by MaskDP during training, not by
  this pipeline), and ``--preview_dir`` strips show the source. Keep them as private as the
  source videos; "anonymised" here means "the person's region is replaced", not "safe to share".
"""
